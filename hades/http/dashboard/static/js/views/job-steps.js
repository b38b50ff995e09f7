// The Steps and Metadata tabs of a job: plain renderings of the (redacted) detail.

import { metadataTable, notice } from '../components.js';
import { h } from '../dom.js';
import { formatDateTime, formatDuration, parseTime } from '../format.js';

function chip(text, className = '', testid) {
  return h('span', { class: `chip ${className}`, testid }, text);
}

function limits(step) {
  return [
    step.cpuLimit ? chip(`cpu ${step.cpuLimit}`, 'chip-limit', 'step-cpu') : null,
    step.memoryLimit ? chip(`memory ${step.memoryLimit}`, 'chip-limit', 'step-memory') : null,
    step.memorySwap ? chip(`swap ${step.memorySwap}`, 'chip-limit') : null,
    step.pidsLimit ? chip(`pids ${step.pidsLimit}`, 'chip-limit') : null,
    step.network ? chip(`network ${step.network}`, 'chip-limit') : null,
    step.continueOnError ? chip('continue on error', 'chip-flag') : null,
  ];
}

function stepStatus(step) {
  if (!step.status) return null;
  const status = String(step.status);
  return h('span', { class: `chip step-status step-${status.toLowerCase()}`, testid: 'step-status', 'data-status': status }, status);
}

function stepCard(step, index) {
  const started = parseTime(step.startedAt);
  const finished = parseTime(step.finishedAt);
  return h(
    'article',
    { class: 'card step', testid: 'step-card', 'data-step-id': step.id ?? index },
    h('header', { class: 'step-head' },
      h('h3', {}, h('span', { class: 'step-index' }, `${index + 1}`), step.name || `Step ${step.id ?? index + 1}`),
      h('div', { class: 'step-flags' },
        stepStatus(step),
        step.exitCode !== undefined && step.exitCode !== null
          ? chip(`exit ${step.exitCode}`, step.exitCode === 0 ? 'chip-ok' : 'chip-bad', 'step-exit-code')
          : null)),
    h('dl', { class: 'step-meta' },
      h('div', { class: 'field' }, h('dt', {}, 'Image'), h('dd', {}, h('code', { testid: 'step-image' }, step.image || '—'))),
      started !== null ? h('div', { class: 'field' }, h('dt', {}, 'Started'), h('dd', {}, formatDateTime(step.startedAt))) : null,
      finished !== null ? h('div', { class: 'field' }, h('dt', {}, 'Finished'), h('dd', {}, formatDateTime(step.finishedAt))) : null,
      started !== null && finished !== null ? h('div', { class: 'field' }, h('dt', {}, 'Duration'), h('dd', {}, formatDuration(finished - started))) : null),
    h('div', { class: 'chips' }, limits(step)),
    step.reason ? notice('danger', step.reason, 'step-reason') : null,
    h('h4', {}, 'Script'),
    h('pre', { class: 'script', testid: 'step-script', tabindex: 0 }, h('code', {}, step.script ?? '')),
    h('h4', {}, 'Step metadata'),
    metadataTable(step.metadata, { label: 'Step metadata', testid: 'step-metadata' }),
  );
}

function stageRow(stage) {
  const status = String(stage.status ?? '');
  return h('tr', { testid: 'stage-row', 'data-stage': stage.name },
    h('td', {}, stage.job_id ? h('a', { href: `/jobs/${encodeURIComponent(stage.job_id)}` }, stage.name) : stage.name),
    h('td', {}, h('span', { class: `chip step-status step-${status.toLowerCase()}`, 'data-status': status }, status)),
    h('td', {}, (stage.needs ?? []).join(', ') || '—'),
    h('td', {}, stage.reason ?? ''));
}

// A pipeline's stages (docs/pipelines.md): each links to the job it runs as.
function renderStages(stages) {
  return h('table', { class: 'table stages', testid: 'pipeline-stages' },
    h('caption', { class: 'visually-hidden' }, 'Stages, in declaration order'),
    h('thead', {}, h('tr', {}, h('th', {}, 'Stage'), h('th', {}, 'Status'), h('th', {}, 'Needs'), h('th', {}, 'Reason'))),
    h('tbody', {}, stages.map(stageRow)));
}

export function renderSteps(detail) {
  const steps = detail.steps ?? [];
  if (Array.isArray(detail.stages)) return renderStages(detail.stages);
  if (steps.length === 0) {
    return detail.payloadAvailable === false
      ? notice('info', "The job's payload is not available, so its steps are unknown.", 'steps-unavailable')
      : h('p', { class: 'muted' }, 'This job has no steps.');
  }
  return h('div', { class: 'steps' }, steps.map(stepCard));
}

export function renderMetadata(detail) {
  return h(
    'div',
    {},
    h('p', { class: 'muted' }, 'Values that look like secrets are redacted by Hades before they reach the browser.'),
    metadataTable(detail.metadata, { label: 'Job metadata', testid: 'job-metadata' }),
  );
}
