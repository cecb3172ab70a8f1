export * from './load.js';
export * from './parse-written.js';
export * from './schema.js';
export * from './write.js';
export * from './secret-text.js';
