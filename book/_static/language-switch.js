// The language switch: every page of the English site (the root) links to the same page of the
// Chinese site (zh/ below the root) and back. Both sites are built from the same sources, so the
// page's path below its site's root is the same in both; Sphinx gives that root as data-content_root.
// The section (#anchor) goes along: a Chinese section has its English twin's id (site/course_site.py).
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
    var target = new URL((chinese ? "../" : "zh/") + page, root).href;
    // The section the reader is in: the address's #anchor, else the last section whose top has
    // scrolled past the top of the window (not the page's own title section).
    function section(scrolled) {
      if (window.location.hash || !scrolled) { return window.location.hash; }
      var found = "";
      var all = document.querySelectorAll("article section[id]");
      for (var i = 1; i < all.length; i++) {
        if (all[i].getBoundingClientRect().top <= 90) { found = "#" + all[i].id; }
      }
      return found;
    }
    function follow(event) { link.href = target + section(!!event); }
    follow();
    window.addEventListener("hashchange", function () { follow(); });
    link.addEventListener("mousedown", follow);
    link.addEventListener("focus", follow);
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
