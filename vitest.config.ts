import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Console tests run in jsdom, each file saying so (@vitest-environment jsdom).
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'console/src/**/*.test.{ts,tsx}'],
    // Subprocess and database tests start real servers; a 2-core CI machine needs room.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    globalSetup: ['test/global-setup.ts'],
  },
});
