export declare const protoDir: string;
export declare const workerProtoPath: string;
