// Verdict filters for the case rows, and the links into them. Vanilla JS, no fetches.
// Rows are hidden by CSS classes on <main> (one class change per verdict, whatever the number
// of rows); a section whose verdicts are all hidden is hidden too (data-verdicts lists them).
(function () {
  var boxes = Array.prototype.slice.call(document.querySelectorAll("#filters input[data-verdict]"));
  var main = document.getElementById("cases");
  var sections = Array.prototype.slice.call(
    document.querySelectorAll("section.scenario, section.group, section.agent"));
  var rows = document.querySelectorAll("tr.case");
  var counter = document.getElementById("shown");

  function shown() {
    var on = {};
    boxes.forEach(function (box) { on[box.getAttribute("data-verdict")] = box.checked; });
    return on;
  }

  function apply() {
    var on = shown();
    var total = 0;
    boxes.forEach(function (box) {
      var verdict = box.getAttribute("data-verdict");
      main.classList.toggle("hide-" + verdict, !on[verdict]);
      if (on[verdict]) { total += Number(box.parentNode.querySelector(".count").textContent); }
    });
    sections.forEach(function (section) {
      var verdicts = section.getAttribute("data-verdicts").split(" ").filter(Boolean);
      var any = verdicts.length === 0 || verdicts.some(function (v) { return on[v]; });
      section.classList.toggle("hidden", !any);
    });
    counter.textContent = total + " of " + rows.length + " cases shown";
  }

  function only(verdicts) {
    boxes.forEach(function (box) {
      box.checked = verdicts === null || verdicts.indexOf(box.getAttribute("data-verdict")) >= 0;
    });
    apply();
  }

  // A link can preselect verdicts: report.html#show=fail,non-strict (or #show=all).
  // "all" (or a list naming no known verdict) shows everything rather than a blank page.
  function fromHash() {
    var match = /^#show=([a-z,-]*)$/.exec(window.location.hash);
    if (!match) { return false; }
    var known = boxes.map(function (box) { return box.getAttribute("data-verdict"); });
    var wanted = match[1].split(",").filter(function (v) { return known.indexOf(v) >= 0; });
    only(match[1] === "all" || wanted.length === 0 ? null : wanted);
    return true;
  }

  boxes.forEach(function (box) { box.addEventListener("change", apply); });
  document.getElementById("show-all").addEventListener("click", function () { only(null); });
  document.getElementById("show-problems").addEventListener("click", function () {
    only(["fail", "non-strict"]);
  });
  window.addEventListener("hashchange", fromHash);
  // A link to something the filters hide (a problem's case, a heatmap cell): show everything
  // first, so the link lands on what it names.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a[href^='#']");
    if (!link) { return; }
    var target = document.getElementById(link.getAttribute("href").slice(1));
    if (target && target.offsetParent === null && main.contains(target)) { only(null); }
  });
  if (!fromHash()) { apply(); }

  // Markers for automated checks: the page's script ran to the end.
  var root = document.documentElement;
  root.setAttribute("data-timelines", String(document.querySelectorAll("svg.timeline").length));
  root.setAttribute("data-cases", String(rows.length));
  root.setAttribute("data-scenarios", String(document.querySelectorAll("section.scenario").length));
  root.setAttribute("data-js", "ready");
})();
