// deltamem inspector: a little plain JavaScript, no framework, nothing fetched.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // Forms that change something irreversibly ask first.
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      if (!window.confirm(form.getAttribute("data-confirm"))) ev.preventDefault();
    });
  });
  // A hand edit to an unchanged or very short text ("x") asks before it is saved.
  var edit = document.getElementById("edit-form");
  if (edit) {
    edit.addEventListener("submit", function (ev) {
      var area = edit.querySelector("textarea[name=content]");
      var text = area.value.trim();
      var before = area.defaultValue.trim();
      var shortBelow = parseInt(edit.getAttribute("data-short-below"), 10) || 0;
      if (text === before) {
        if (!window.confirm("The text is unchanged: saving it records nothing. Save anyway?")) {
          ev.preventDefault();
        }
      } else if (text.length < shortBelow) {
        if (window.confirm("\u201c" + text + "\u201d is very short for a fact. Save it as a new version?")) {
          edit.querySelector("input[name=confirmed]").value = "1";
        } else {
          ev.preventDefault();
        }
      }
    });
  }
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
