export * from './contract.js';
export * from './permissions.js';
export * from './reasons.js';
export * from './speech.js';
export * from './schemas.js';
export * from './worker-protocol.js';
export * from './cidr.js';
export * from './outbound.js';
