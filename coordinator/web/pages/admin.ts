import { maybeId } from '../lib/dom.js';

/**
 * Administrator conveniences: the execution-target selector says why the chosen worker is
 * incompatible or which differences a forced run overrides (the server refuses incompatible
 * choices either way).
 */
const target = maybeId('target-select');
const select = target instanceof HTMLSelectElement ? target : null;
const reason = maybeId('target-reason');
if (select && reason) {
  const show = () => {
    reason.textContent = select.selectedOptions[0]?.dataset.reason ?? '';
  };
  select.addEventListener('change', show);
  show();
}
