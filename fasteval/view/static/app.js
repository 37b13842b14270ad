// fasteval viewer: the few behaviours a server-rendered page needs (no framework, no network).
(function () {
  "use strict";
  const box = document.getElementById("lightbox");
  document.addEventListener("click", function (ev) {
    const t = ev.target;
    if (box && t instanceof HTMLImageElement && t.classList.contains("thumb")) {
      ev.preventDefault();
      box.querySelector("img").src = t.src;
      box.showModal();
    } else if (box && t === box.querySelector("img")) {
      box.close();
    }
  });
  if (box) {
    box.addEventListener("click", function (ev) { if (ev.target === box) { box.close(); } });
  }
  // Filters apply as soon as a dropdown changes; text and numbers on Enter or the button.
  document.querySelectorAll("form.filters select").forEach(function (sel) {
    sel.addEventListener("change", function () { sel.form.submit(); });
  });
})();
