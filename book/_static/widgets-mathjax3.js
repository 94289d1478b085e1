/* The Jupyter widget manager (@jupyter-widgets/html-manager 1.x) typesets widget labels with the
   MathJax 2 API, MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]); the book loads MathJax 3,
   which has no Hub, so every widget with a label threw "Cannot read properties of undefined
   (reading 'Queue')" and stopped rendering. This shim answers that call with MathJax 3's
   typesetPromise. It is loaded before the widget manager (see nb_ipywidgets_js in _config.yml). */
(function () {
  "use strict";
  function queue(args) {
    var mathjax = window.MathJax;
    var element = args && args[2];
    if (!mathjax || !mathjax.startup || !mathjax.startup.promise) {
      return;
    }
    mathjax.startup.promise
      .then(function () {
        return mathjax.typesetPromise ? mathjax.typesetPromise(element ? [element] : undefined) : null;
      })
      .catch(function (error) {
        console.warn("widgets-mathjax3: could not typeset a widget label", error);
      });
  }
  function install() {
    if (window.MathJax && !window.MathJax.Hub) {
      window.MathJax.Hub = { Queue: queue };
    }
  }
  install();
  // MathJax 3 may replace the global object when it starts; install again before widgets render.
  document.addEventListener("DOMContentLoaded", install);
  window.addEventListener("load", install);
})();
