// Progressive touches only: every page reads and every form posts without this script.
"use strict";
document.documentElement.classList.add("js");

function copyText(button) {
  const text = button.dataset.copy;
  const done = () => {
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  };
  if (navigator.clipboard) {
    navigator.clipboard.writeText(text).then(done, () => selectDigest(button));
  } else {
    selectDigest(button);
  }
}

function selectDigest(button) {
  const code = button.parentElement.querySelector("code");
  const range = document.createRange();
  range.selectNodeContents(code);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button.copy")) {
    button.hidden = false;
    button.addEventListener("click", () => copyText(button));
  }
  // a long line of versions: show the page's own version, not the line's first
  for (const graph of document.querySelectorAll(".graph")) {
    const current = graph.querySelector(".node.current rect");
    if (current) {
      const box = current.getBoundingClientRect();
      const frame = graph.getBoundingClientRect();
      graph.scrollLeft += box.left - frame.left - (frame.width - box.width) / 2;
    }
  }
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
});
