// Typesets the formulas pymdownx.arithmatex marks (generic mode: \( … \) inline, \[ … \] displayed) with KaTeX,
// which ships with the site (docs/vendor/katex: KaTeX 0.19.1 from npm), so the equations read the same offline.
// A page without math has no .arithmatex element and runs nothing; a formula KaTeX cannot read stays as TeX and
// is reported on the console (tests/test_docs_browser.py fails on both).
document$.subscribe(({ body }) => {
  for (const element of body.querySelectorAll(".arithmatex")) {
    if (element.querySelector(".katex")) continue; // typeset already
    const source = element.textContent.trim();
    const displayed = source.startsWith("\\[");
    try {
      katex.render(source.slice(2, -2), element, { displayMode: displayed, throwOnError: true });
    } catch (error) {
      console.error(`KaTeX could not typeset ${source}: ${error.message}`);
    }
  }
});
