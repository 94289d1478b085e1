"""What a Chinese learner reads around the prose (issue 29): the lines test cells print, hints passed to
``explain_errors`` by position, and no italics on Chinese characters."""

from autograder.course.i18n import reader_checks


def test_italics_on_chinese_characters_are_found_and_bold_or_italic_english_is_not():
    """Chapter 01 set 增长*成为可能* in italics, which a browser slants (Chinese type has none); the first
    form of the check took the Chinese character before the asterisk for a letter and missed all 15."""
    found = reader_checks.italic_problems
    assert len(found("只是让增长*成为可能*：饱和。")) == 1
    assert len(found("即*句子嵌入*，与一_组_连续的头")) == 2
    assert found("这是 *键/值* 头")
    assert not found("把 *tired* 换成 *wide*；**粗体**不算；`a*b*c` 之外的 q_proj_x 与 2*3*4 也不算。")
    assert not found("* 列表的一项\n* 另一项")
    assert reader_checks.typesetting_problems("增长*成为可能*。"), "i18n check reads it through typesetting_problems"
