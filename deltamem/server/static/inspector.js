// deltamem inspector: a little plain JavaScript, no framework, nothing fetched.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // Forms that change something irreversibly ask first.
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      if (!window.confirm(form.getAttribute("data-confirm"))) ev.preventDefault();
    });
  });
  // Bring the first highlighted (source) turn of a transcript into view.
  var first = document.querySelector("ol.transcript:not(.excerpt) li.turn.hl");
  if (first && !window.location.hash) first.scrollIntoView({ block: "center" });
  // Links to a turn of this page's transcript mark it while it is shown.
  document.querySelectorAll("a[href^='#turn-']").forEach(function (a) {
    a.addEventListener("click", function () {
      var target = document.getElementById(a.getAttribute("href").slice(1));
      if (!target) return;
      document.querySelectorAll("li.turn.flash-hl").forEach(function (li) {
        li.classList.remove("flash-hl");
      });
      target.classList.add("flash-hl");
    });
  });
});
