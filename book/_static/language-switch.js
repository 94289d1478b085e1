// The language switch: every page of the English site (the root) links to the same page of the
// Chinese site (zh/ below the root) and back. Both sites are built from the same sources, so the
// page's path below its site's root is the same in both; Sphinx gives that root as data-content_root.
(function () {
  "use strict";
  function addSwitch() {
    var html = document.documentElement;
    var root = new URL(html.dataset.content_root || "./", window.location.href);
    var here = window.location.origin === "null" || window.location.protocol === "file:"
      ? window.location.href.split(/[?#]/)[0]
      : window.location.origin + window.location.pathname;
    var page = here.indexOf(root.href) === 0 ? here.slice(root.href.length) : "";
    var chinese = (html.lang || "").toLowerCase().indexOf("zh") === 0;
    var link = document.createElement("a");
    link.className = "course-language-switch btn btn-sm";
    link.href = new URL((chinese ? "../" : "zh/") + page, root).href;
    link.lang = chinese ? "en" : "zh-CN";
    link.hreflang = link.lang;
    link.textContent = chinese ? "English" : "中文";
    link.title = chinese ? "Read this page in English" : "阅读本页的中文版";
    var place = document.querySelector(".article-header-buttons") || document.querySelector(".bd-header-article")
      || document.body;
    place.insertBefore(link, place.firstChild);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", addSwitch);
  } else {
    addSwitch();
  }
})();
