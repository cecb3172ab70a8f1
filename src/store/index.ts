export * from './open.js';
export type * from './store.js';
