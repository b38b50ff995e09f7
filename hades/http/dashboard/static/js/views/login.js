// The sign-in form. Error wording follows the Go dashboard: 429, 503, else "Invalid username or password."

import { request } from '../api.js';
import { h, setText } from '../dom.js';

const MESSAGES = {
  429: 'Too many attempts. Wait a few minutes, then try again.',
  503: 'The dashboard is not configured. Set DASHBOARD_USERNAME, DASHBOARD_PASSWORD_HASH and DASHBOARD_SESSION_SECRET.',
};

export function loginError(status) {
  if (status === 0) return 'The Hades API is unreachable. Check your connection and try again.';
  return MESSAGES[status] ?? 'Invalid username or password.';
}

export function mountLogin(root, { onLogin, configured }) {
  const error = h('p', { class: 'form-error', testid: 'login-error', role: 'alert', hidden: true });
  const username = h('input', {
    id: 'login-username', name: 'username', type: 'text', autocomplete: 'username', required: true,
    autocapitalize: 'none', spellcheck: 'false', testid: 'login-username',
  });
  const password = h('input', {
    id: 'login-password', name: 'password', type: 'password', autocomplete: 'current-password', required: true,
    testid: 'login-password',
  });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary btn-block', testid: 'login-submit' }, 'Sign in');

  const showError = (text) => {
    setText(error, text);
    error.hidden = !text;
  };

  const form = h(
    'form',
    { class: 'login-form', testid: 'login-form', novalidate: true },
    h('div', { class: 'form-row' }, h('label', { for: 'login-username' }, 'Username'), username),
    h('div', { class: 'form-row' }, h('label', { for: 'login-password' }, 'Password'), password),
    error,
    submit,
  );
  error.id = 'login-error';

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!username.value || !password.value) {
      showError('Enter your username and password.');
      (username.value ? password : username).focus();
      return;
    }
    submit.disabled = true;
    setText(submit, 'Signing in…');
    showError('');
    try {
      const answer = await request('/api/login', {
        method: 'POST',
        body: { username: username.value, password: password.value },
      });
      if (answer.ok) {
        onLogin(answer.data);
        return;
      }
      showError(loginError(answer.status));
      password.value = '';
      password.focus();
    } catch {
      showError(loginError(0));
    } finally {
      submit.disabled = false;
      setText(submit, 'Sign in');
    }
  });

  root.append(
    h(
      'section',
      { class: 'login-page', 'aria-labelledby': 'login-title' },
      h(
        'div',
        { class: 'card login-card' },
        h('div', { class: 'login-brand' }, h('img', { src: '/static/favicon.svg', alt: '', width: 36, height: 36 })),
        h('h1', { id: 'login-title' }, 'Sign in to Hades'),
        h('p', { class: 'muted' }, 'The job scheduler dashboard.'),
        form,
      ),
    ),
  );
  if (!configured) showError(MESSAGES[503]);
  username.focus();
  return null;
}
