"""A small element tree of an HTML page (stdlib html.parser), for tests that read the
`--format html` page without a browser: find elements by tag, id, class or attribute."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element] = field(default_factory=list)
    text: str = ""  # the text directly inside, in order

    def iter(self):
        yield self
        for c in self.children:
            yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Element]:
        return [e for e in self.iter() if (tag is None or e.tag == tag)
                and (cls is None or cls in e.attrs.get("class", "").split())
                and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def by_id(self, id_: str) -> Element:
        (found,) = self.find_all(id=id_)
        return found

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        el = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(el)
        if tag not in VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data):
        self.stack[-1].text += data


def parse(text: str) -> Element:
    b = _Builder()
    b.feed(text)
    b.close()
    assert b.stack == [b.root], f"unclosed: {[e.tag for e in b.stack[1:]]}"
    return b.root
