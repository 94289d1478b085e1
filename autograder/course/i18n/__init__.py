"""The Chinese edition: gettext catalogues of the English prose, and the Chinese book built from them.

One source of truth. The English pages (``book/``, ``exercises/``) are the only place where code and
prose are written. Their prose is cut into blocks (paragraphs, headings, list items kept together,
a fenced code or math block never cut) and each block is a message of a standard gettext catalogue,
``locales/zh_CN/LC_MESSAGES/<page>.po``, one per page, in the layout ``sphinx-intl`` uses. Translators
edit those files with any PO editor. ``python -m autograder i18n update`` re-extracts the English
messages and merges them into the catalogues with Babel (the ``msgmerge`` of the Python world): a new
paragraph appears untranslated, a changed one keeps its old translation marked ``#, fuzzy`` with the
previous English text beside it (``#| msgid``), so the translator sees exactly what changed.
``python -m autograder i18n build`` writes the Chinese book under ``zh/``: each English notebook with
its markdown cells replaced block by block and its code cells copied unchanged, the Markdown pages
likewise, and its own ``_config.yml`` and ``_toc.yml``. ``i18n check`` fails on any untranslated or
fuzzy block, on a ``zh/`` tree that is not what ``build`` writes, and on a code cell that differs.

Why not Sphinx's own gettext builder: MyST-NB cannot read translated notebooks back (its notebook
parser receives the translated text as if it were a notebook: executablebooks/MyST-NB#587), and
Colab needs real Chinese notebooks to open. So the catalogues are standard, and the rebuild of the
pages from them is ours.

The modules, by job:

- :mod:`autograder.course.i18n.extract`: The English pages cut into blocks, and the blocks a translator
  translates (the messages).
- :mod:`autograder.course.i18n.catalogues`: The gettext catalogues of the pages: read, written and merged with
  Babel, each message's markup checked, and a page's text translated from them.
- :mod:`autograder.course.i18n.typesetting`: Chinese typesetting: lines joined between Chinese characters, and
  the phrases in formulas (``\\text{...}``) translated.
- :mod:`autograder.course.i18n.docstring_text`: The docstrings of the solutions' code: read, removed and
  translated without touching the code.
- :mod:`autograder.course.i18n.edition`: The Chinese edition built from the catalogues: ``zh/``'s pages, its
  table of contents and configuration, the Chinese site, and the checks that the edition is complete and
  current.
- :mod:`autograder.course.i18n.runtime_text`: What the code shows (figure text, widget labels, test messages):
  its strings, and the two catalogues that ship with ``course_runtime``.
- :mod:`autograder.course.i18n.reader_checks`: What a Chinese reader sees: English left over, typesetting
  mistakes, one form per term.
"""
