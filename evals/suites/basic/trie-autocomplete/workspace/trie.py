"""A prefix tree of words."""


class _Node:
    __slots__ = ("children", "terminal")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.terminal = False


class Trie:
    def __init__(self) -> None:
        self._root = _Node()
        self._size = 0

    def insert(self, word: str) -> None:
        node = self._root
        for ch in word:
            node = node.children.setdefault(ch, _Node())
        if not node.terminal:
            node.terminal = True
            self._size += 1

    def _find(self, text: str) -> _Node | None:
        node = self._root
        for ch in text:
            node = node.children.get(ch)
            if node is None:
                return None
        return node

    def __contains__(self, word: str) -> bool:
        node = self._find(word)
        return node is not None and node.terminal

    def __len__(self) -> int:
        return self._size

    def node_count(self) -> int:
        stack, total = [self._root], 0
        while stack:
            node = stack.pop()
            total += 1
            stack.extend(node.children.values())
        return total
