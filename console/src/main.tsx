import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';

import { ApiError } from './api.js';
import { App } from './app.js';
import './styles.css';

const client = new QueryClient({
  defaultOptions: {
    queries: {
      // Live events (live.ts) say when data changes; no refetch on a timer or on focus.
      staleTime: Infinity,
      refetchOnWindowFocus: false,
      // A refusal (a 4xx) will not change by asking again; an unreachable server may.
      retry: (count, e) => !(e instanceof ApiError && e.status >= 400 && e.status < 500) && count < 3,
    },
  },
});

const root = document.getElementById('root');
if (root === null) throw new Error('index.html has no #root');
createRoot(root).render(
  <StrictMode>
    <QueryClientProvider client={client}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
);
