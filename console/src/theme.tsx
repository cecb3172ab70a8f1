import { useEffect, useState } from 'react';

export type Theme = 'system' | 'light' | 'dark';

const storageKey = 'llmgw.theme';

function loadTheme(): Theme {
  const t = localStorage.getItem(storageKey);
  return t === 'light' || t === 'dark' ? t : 'system';
}

/** Light, dark, or the system's (prefers-color-scheme, in styles.css): kept per browser. */
export function ThemeSelect() {
  const [theme, setTheme] = useState<Theme>(loadTheme);
  useEffect(() => {
    if (theme === 'system') {
      delete document.documentElement.dataset['theme'];
      localStorage.removeItem(storageKey);
    } else {
      document.documentElement.dataset['theme'] = theme;
      localStorage.setItem(storageKey, theme);
    }
  }, [theme]);
  return (
    <label className="theme">
      Theme
      <select
        value={theme}
        onChange={(e) => {
          setTheme(e.target.value as Theme);
        }}
      >
        <option value="system">System</option>
        <option value="light">Light</option>
        <option value="dark">Dark</option>
      </select>
    </label>
  );
}
