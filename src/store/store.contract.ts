import { afterAll, beforeAll, describe } from 'vitest';

import { clusterCases } from './store-cluster.contract.js';
import { fleetCases } from './store-fleet.contract.js';
import { modelCases } from './store-models.contract.js';
import type { Store } from './store.js';
import type { Contract, ContractOptions, StoreHarness } from './store-fixtures.contract.js';

/** The Store contract, run against each implementation (sqlite/ and postgres/ call it from their tests). */
export function storeContract(name: string, options: ContractOptions, harness: () => StoreHarness): void {
  describe(`Store contract: ${name}`, () => {
    let h: StoreHarness | undefined;
    let store: Store | undefined;
    const c: Contract = {
      get store() {
        if (store === undefined) throw new Error('the store is opened in beforeAll');
        return store;
      },
      get harness() {
        if (h === undefined) throw new Error('the harness is made in beforeAll');
        return h;
      },
      options,
    };

    beforeAll(async () => {
      h = harness();
      store = await h.open();
    });
    afterAll(async () => {
      await store?.close();
      await h?.cleanup();
    });

    // In this order: later cases read what earlier ones wrote (a restart keeps it all).
    modelCases(c);
    fleetCases(c);
    clusterCases(c);
  });
}
