/**
 * Loaded on every page: conveniences that inline handlers would otherwise provide (the CSP allows
 * no inline script). `form[data-confirm]` asks before posting; `input[readonly]` selects on focus
 * (the share link).
 */
document.addEventListener('submit', (event) => {
  const form = event.target;
  if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) event.preventDefault();
});

document.addEventListener('focusin', (event) => {
  const input = event.target;
  if (input instanceof HTMLInputElement && input.readOnly) input.select();
});
