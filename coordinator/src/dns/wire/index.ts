/** The DNS master-server client layer: validation, TSIG, UPDATE, TCP client, zone-file reads. */
export * from './errors.js';
export * from './names.js';
export * from './rdata.js';
export * from './tsig.js';
export * from './update.js';
export * from './tcp-client.js';
export * from './zone-file.js';
export { parseMessage } from './message.js';
