// Absolute paths of the protocol files, so both packages load the same definition
// whether they run from this repository or from an installed package.
import { fileURLToPath } from 'node:url';

export const protoDir = fileURLToPath(new URL('.', import.meta.url));
export const workerProtoPath = fileURLToPath(new URL('./worker.proto', import.meta.url));
