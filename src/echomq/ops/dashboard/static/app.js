// EchoMQ dashboard: select-all, and a confirmation before any action. No dependencies.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form.jobs-form")) {
    const all = form.querySelector("input.all");
    const boxes = () => [...form.querySelectorAll("input[type=checkbox][name=id]")];
    const sync = () => {
      const n = boxes().filter((b) => b.checked).length;
      for (const b of form.querySelectorAll("button.act")) b.disabled = n === 0;
      form.querySelectorAll("tbody tr").forEach((tr) => {
        const b = tr.querySelector("input[name=id]");
        tr.classList.toggle("picked", !!(b && b.checked));
      });
    };
    if (all) all.addEventListener("change", () => { boxes().forEach((b) => { b.checked = all.checked; }); sync(); });
    form.addEventListener("change", sync);
    sync();
  }
  for (const button of document.querySelectorAll("button[data-confirm]")) {
    button.addEventListener("click", (ev) => {
      const form = button.form;
      const n = form ? form.querySelectorAll("input[name=id]:checked, input[type=hidden][name=id]").length : 0;
      const text = button.dataset.confirm.replace("{n}", String(n));
      if (!window.confirm(text.charAt(0).toUpperCase() + text.slice(1))) ev.preventDefault();
    });
  }
});
