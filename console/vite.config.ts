import { fileURLToPath } from 'node:url';

import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

// Built into the package's dist/console, which the control plane serves at / (src/server/console-route.ts).
export default defineConfig({
  root,
  base: '/',
  plugins: [react()],
  build: {
    outDir: fileURLToPath(new URL('../dist/console', import.meta.url)),
    emptyOutDir: true,
    // Hashed names under assets/: served with a year's cache; index.html is never cached.
    assetsDir: 'assets',
    sourcemap: false,
  },
  server: {
    // `npx vite --config console/vite.config.ts` against a control plane on its default port.
    proxy: { '/api': 'http://127.0.0.1:8080', '/v1': 'http://127.0.0.1:8080' },
  },
});
