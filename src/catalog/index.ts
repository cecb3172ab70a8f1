export * from './gpu-class.js';
export * from './model-spec.js';
export * from './validate.js';
