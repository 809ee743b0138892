// Verdict filters for the matrix and the case sections. Vanilla JS, no fetches.
(function () {
  var boxes = Array.prototype.slice.call(document.querySelectorAll("#filters input[data-verdict]"));

  function shown() {
    var on = {};
    boxes.forEach(function (box) { on[box.getAttribute("data-verdict")] = box.checked; });
    return on;
  }

  function apply() {
    var on = shown();
    document.querySelectorAll("article.case").forEach(function (article) {
      article.classList.toggle("hidden", !on[article.getAttribute("data-verdict")]);
    });
    document.querySelectorAll("section.agent").forEach(function (section) {
      var visible = section.querySelectorAll("article.case:not(.hidden)").length;
      var total = section.querySelectorAll("article.case").length;
      section.classList.toggle("hidden", total > 0 && visible === 0);
    });
    document.querySelectorAll("#matrix tbody tr").forEach(function (row) {
      var any = false;
      row.querySelectorAll("td[data-verdict]").forEach(function (cell) {
        var visible = !!on[cell.getAttribute("data-verdict")];
        cell.classList.toggle("dim", !visible);
        any = any || visible;
      });
      row.classList.toggle("hidden", !any);
    });
  }

  function only(verdicts) {
    boxes.forEach(function (box) {
      box.checked = verdicts === null || verdicts.indexOf(box.getAttribute("data-verdict")) >= 0;
    });
    apply();
  }

  boxes.forEach(function (box) { box.addEventListener("change", apply); });
  document.getElementById("show-all").addEventListener("click", function () { only(null); });
  document.getElementById("show-problems").addEventListener("click", function () {
    only(["fail", "non-strict"]);
  });
  // A link can preselect verdicts: report.html#show=fail,non-strict (or #show=all)
  var match = /^#show=([a-z,-]*)$/.exec(window.location.hash);
  if (match) {
    // "all" (or a list naming no known verdict) shows everything rather than a blank page.
    var known = boxes.map(function (box) { return box.getAttribute("data-verdict"); });
    var wanted = match[1].split(",").filter(function (v) { return known.indexOf(v) >= 0; });
    only(match[1] === "all" || wanted.length === 0 ? null : wanted);
  } else {
    apply();
  }

  // Markers for automated checks: the page's script ran to the end.
  var root = document.documentElement;
  root.setAttribute("data-timelines", String(document.querySelectorAll("svg.timeline").length));
  root.setAttribute("data-cases", String(document.querySelectorAll("article.case").length));
  root.setAttribute("data-js", "ready");
})();
