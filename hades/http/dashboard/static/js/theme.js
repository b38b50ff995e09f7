// Light/dark theme: the user's choice is kept in localStorage; without one the system preference applies.

const KEY = 'hades-theme';

function stored() {
  try {
    const value = localStorage.getItem(KEY);
    return value === 'light' || value === 'dark' ? value : null;
  } catch {
    return null;
  }
}

/** The theme in effect now. */
export function currentTheme() {
  return stored() ?? (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');
}

/** Apply the saved theme (if any) to <html data-theme>. */
export function initTheme() {
  document.documentElement.dataset.theme = currentTheme();
}

/** Switch light ↔ dark and remember it; returns the new theme. */
export function toggleTheme() {
  const next = currentTheme() === 'dark' ? 'light' : 'dark';
  try {
    localStorage.setItem(KEY, next);
  } catch {
    // private mode: the switch still works for this page
  }
  document.documentElement.dataset.theme = next;
  return next;
}
