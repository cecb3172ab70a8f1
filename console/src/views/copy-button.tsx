import { useState } from 'react';

/**
 * Copies `text`. The clipboard API exists only in secure contexts (https or localhost), and a
 * control plane is often reached over plain http: then the text is selected in its field for
 * the user to copy, and the button says so.
 */
export function CopyButton({ text, label, field }: { text: string; label: string; field?: string }) {
  const [said, setSaid] = useState<string | undefined>();
  const copy = async () => {
    try {
      // [SecureContext]: absent, not failing, over plain http.
      if (!('clipboard' in navigator)) throw new Error('no clipboard');
      await navigator.clipboard.writeText(text);
      setSaid('Copied');
    } catch {
      const el = field === undefined ? null : document.getElementById(field);
      if (el instanceof HTMLInputElement) {
        el.focus();
        el.select();
      }
      setSaid('Selected: press Ctrl+C (⌘C) to copy');
    }
  };
  return (
    <>
      <button type="button" aria-label={label} onClick={() => void copy()}>
        Copy
      </button>
      <span role="status" className="hint">
        {said}
      </span>
    </>
  );
}
