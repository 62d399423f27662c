// Original file: worker.proto


export interface ReleaseResponse {
}

export interface ReleaseResponse__Output {
}
