import type { UseQueryResult } from '@tanstack/react-query';

/** A query's loading state, or its refusal in the server's words, where its data would be. */
export function QueryError({ query, what }: { query: UseQueryResult; what: string }) {
  if (query.isPending) return <p className="hint">Loading {what}…</p>;
  if (query.error === null) return null;
  return (
    <p role="alert" className="error">
      Could not load {what}: {query.error.message}
    </p>
  );
}
