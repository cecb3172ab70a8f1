/**
 * The registry's engines, for the tests of the planner and the catalog. Those folders sit below
 * src/engines and are given the engines they plan with or check against, never importing them;
 * their tests compose them with the real engines as the control plane does.
 */
export { engines } from '../../src/engines/registry.js';
