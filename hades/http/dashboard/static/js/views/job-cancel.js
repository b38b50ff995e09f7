// The cancel confirmation: a modal <dialog> with an optional reason; POST /api/jobs/:id/cancel.

import { jobPath, request } from '../api.js';
import { h, setText } from '../dom.js';

/** Ask, then cancel; ``onDone(answer)`` runs after the API accepted (202) or refused with 409. */
export function confirmCancel(job, onDone) {
  const reason = h('input', { id: 'cancel-reason', type: 'text', value: 'Cancelled from the dashboard', maxlength: 500, testid: 'cancel-reason' });
  const error = h('p', { class: 'form-error', role: 'alert', testid: 'cancel-error', hidden: true });
  const confirm = h('button', { type: 'submit', class: 'btn btn-danger', testid: 'cancel-confirm' }, 'Cancel job');
  const keep = h('button', { type: 'button', class: 'btn', testid: 'cancel-keep' }, job.status === 'Running' ? 'Keep running' : 'Keep queued');
  const form = h('form', { method: 'dialog', class: 'dialog-form' },
    h('h2', { id: 'cancel-title' }, 'Cancel this job?'),
    h('p', { id: 'cancel-desc' }, job.status === 'Running'
      ? `"${job.name || job.id}" is running. Its current step is stopped and the job ends as Stopped.`
      : `"${job.name || job.id}" is queued. It will not run and ends as Stopped.`),
    h('div', { class: 'form-row' }, h('label', { for: 'cancel-reason' }, 'Reason (optional)'), reason),
    error,
    h('div', { class: 'dialog-actions' }, keep, confirm));
  const dialog = h('dialog', { class: 'dialog', testid: 'cancel-dialog', 'aria-labelledby': 'cancel-title', 'aria-describedby': 'cancel-desc' }, form);
  document.body.append(dialog);
  dialog.addEventListener('close', () => dialog.remove());
  keep.addEventListener('click', () => dialog.close());
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    confirm.disabled = true;
    setText(confirm, 'Cancelling…');
    try {
      const answer = await request(jobPath(job.id, '/cancel'), { method: 'POST', body: { reason: reason.value.trim() } });
      if (answer.ok || answer.status === 409) {
        dialog.close();
        onDone(answer);
        return;
      }
      if (answer.status === 401) {
        dialog.close();
        return;
      }
      error.hidden = false;
      setText(error, `Hades refused: ${answer.data?.error ?? `HTTP ${answer.status}`}`);
    } catch (e) {
      error.hidden = false;
      setText(error, e.message);
    }
    confirm.disabled = false;
    setText(confirm, 'Cancel job');
  });
  dialog.showModal();
  confirm.focus();
}
