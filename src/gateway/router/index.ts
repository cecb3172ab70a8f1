/** The gateway's routing core: which replica takes a request, from the engines' own load. */
export { Breaker, type BreakerOptions, type BreakerState } from './breaker.js';
export { parseLoad, type ParsedLoad } from './prometheus.js';
export { restartingModels } from './restarting-models.js';
export { Router, type RouterOptions } from './router.js';
export {
  Scraper,
  type MetricsAnswer,
  type MetricsGet,
  type ScraperOptions,
  type ScrapeTarget,
} from './scraper.js';
export * from './types.js';
