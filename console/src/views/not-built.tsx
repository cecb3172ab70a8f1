/** A view another change builds; said plainly rather than left blank. */
export function NotBuilt({ title }: { title: string }) {
  return (
    <section aria-labelledby="view-title">
      <h1 id="view-title">{title}</h1>
      <p className="hint">This view is not built yet; llmgw ctl does the same meanwhile.</p>
    </section>
  );
}
