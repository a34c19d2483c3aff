"""A prefix tree of words, with per-word counts."""


class _Node:
    __slots__ = ("children", "count")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.count = 0  # times the word ending here was inserted; 0 = not a word


class Trie:
    def __init__(self) -> None:
        self._root = _Node()
        self._size = 0

    def insert(self, word: str) -> None:
        node = self._root
        for ch in word:
            node = node.children.setdefault(ch, _Node())
        if node.count == 0:
            self._size += 1
        node.count += 1

    def _find(self, text: str) -> _Node | None:
        node = self._root
        for ch in text:
            node = node.children.get(ch)
            if node is None:
                return None
        return node

    def __contains__(self, word: str) -> bool:
        node = self._find(word)
        return node is not None and node.count > 0

    def __len__(self) -> int:
        return self._size

    def count(self, word: str) -> int:
        node = self._find(word)
        return node.count if node is not None else 0

    def complete(self, prefix: str, limit: int = 10) -> list[str]:
        start = self._find(prefix)
        if start is None:
            return []
        found: list[tuple[int, str]] = []
        stack = [(start, prefix)]
        while stack:
            node, text = stack.pop()
            if node.count:
                found.append((-node.count, text))
            stack.extend((child, text + ch) for ch, child in node.children.items())
        return [word for _, word in sorted(found)[:limit]]

    def delete(self, word: str) -> bool:
        path = [self._root]
        for ch in word:
            child = path[-1].children.get(ch)
            if child is None:
                return False
            path.append(child)
        if path[-1].count == 0:
            return False
        path[-1].count = 0
        self._size -= 1
        for depth in range(len(word), 0, -1):
            node = path[depth]
            if node.count or node.children:
                break
            del path[depth - 1].children[word[depth - 1]]
        return True

    def node_count(self) -> int:
        stack, total = [self._root], 0
        while stack:
            node = stack.pop()
            total += 1
            stack.extend(node.children.values())
        return total
