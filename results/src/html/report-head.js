// Runs first: counts script errors so that tests (and curious users) can
// read `data-errors` on <html>; a report that throws is a broken report.
(function () {
  var root = document.documentElement;
  var errors = 0;
  root.setAttribute("data-errors", "0");
  window.addEventListener("error", function () {
    errors += 1;
    root.setAttribute("data-errors", String(errors));
  });
})();
