import { Hono } from 'hono';

import type { TrafficView } from '../../protocol/traffic-views.js';
import type { TrafficSampler } from '../traffic/traffic-sampler.js';
import type { ApiEnv } from './context.js';

/** GET /traffic: the gateway's rates over the last hour (any key that reads the API). */
export function trafficRoute(traffic: TrafficSampler): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.get('/', (c) => c.json<TrafficView>(traffic.view()));
  return app;
}
