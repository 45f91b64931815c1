// calibrate: small progressive enhancements; every page works without this file.
document.addEventListener("keydown", (event) => {
  if (event.key === "/" && !event.target.closest("input, textarea, select")) {
    const search = document.querySelector("[data-search]");
    if (search) { event.preventDefault(); search.focus(); }
  }
});
