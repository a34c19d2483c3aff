"""Exercises in the layout of Aider's polyglot benchmark, for the adapter's tests of what its
tracks need: written here (small invented exercises) or copied from a checkout of the published
benchmark named by HITRATE_POLYGLOT. Each sample says which exercise shows which property and
what the checks on it should see, so the same tests run on either.

The written exercises follow Exercism's layout (`.meta/config.json`, `.meta/` reference files,
`.docs/instructions.md`, stub, tests, per-track build files); their texts are hitrate's own.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent

ENV = "HITRATE_POLYGLOT"


@dataclass(frozen=True)
class PolyglotSample:
    """A polyglot-layout folder and the facts of its exercises that the tests check."""

    root: Path
    cpp: str  # its CMakeLists.txt builds `<folder>_test.cpp`
    cpp_test_cases: int
    python: str  # its stub already passes some of its tests
    python_stub: str
    rust: str  # its reference's dependencies are in .meta/Cargo-example.toml
    rust_oracle_crates: dict[str, str]
    rust_lint: str  # a line of the exercise's own Cargo.toml the solution's manifest keeps
    javascript: str
    javascript_workers: str  # its reference starts worker threads
    javascript_worker_case: str  # a case of it that passes once its workers start
    java: str  # its reference has helper classes listed before the solution file
    java_test: str
    java_reference: tuple[str, ...]
    java_min_disabled: int  # tests switched off with @Disabled in the published test file

    def exercise(self, track: str, slug: str) -> Path:
        return self.root / track / "exercises" / "practice" / slug


def _write(folder: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text).lstrip("\n"), encoding="utf-8")


def _config(solution: list[str], test: list[str], example: list[str]) -> str:
    return json.dumps({"authors": ["hitrate"], "files": {"solution": solution, "test": test, "example": example}, "blurb": "An exercise for hitrate's adapter tests."}, indent=2) + "\n"


# ---- C++: tally-marks -------------------------------------------------------------------------------

# A stand-in for Catch2's single header with the macros the test uses, and its summary line.
CATCH_STAND_IN = r"""
#pragma once
#include <cstdio>
#include <exception>
#include <vector>

namespace mini_catch {
struct Case { const char* name; void (*run)(); };
struct Failure {};
inline std::vector<Case>& cases() { static std::vector<Case> all; return all; }
inline int& assertions() { static int count = 0; return count; }
struct Register { Register(const char* name, void (*run)()) { cases().push_back({name, run}); } };
inline void require(bool ok, const char* expr, const char* file, int line) {
    ++assertions();
    if (!ok) { std::printf("%s:%d: FAILED: REQUIRE( %s )\n", file, line, expr); throw Failure{}; }
}
}  // namespace mini_catch

#define MINI_CATCH_JOIN2(a, b) a##b
#define MINI_CATCH_JOIN(a, b) MINI_CATCH_JOIN2(a, b)
#define TEST_CASE(name, tags) \
    static void MINI_CATCH_JOIN(mini_case_, __LINE__)(); \
    static mini_catch::Register MINI_CATCH_JOIN(mini_register_, __LINE__)(name, &MINI_CATCH_JOIN(mini_case_, __LINE__)); \
    static void MINI_CATCH_JOIN(mini_case_, __LINE__)()
#define REQUIRE(...) mini_catch::require(static_cast<bool>(__VA_ARGS__), #__VA_ARGS__, __FILE__, __LINE__)

#ifdef CATCH_CONFIG_MAIN
int main() {
    std::size_t failed = 0;
    for (const auto& test : mini_catch::cases()) {
        try { test.run(); } catch (const mini_catch::Failure&) { ++failed; } catch (const std::exception& e) {
            std::printf("%s: threw %s\n", test.name, e.what());
            ++failed;
        }
    }
    if (failed == 0) std::printf("All tests passed (%d assertions in %zu test cases)\n", mini_catch::assertions(), mini_catch::cases().size());
    else std::printf("test cases: %zu | %zu failed\n", mini_catch::cases().size(), failed);
    return failed == 0 ? 0 : 1;
}
#endif
"""

CPP = {
    ".meta/config.json": _config(["tally_marks.cpp", "tally_marks.h"], ["tally_marks_test.cpp"], [".meta/example.cpp", ".meta/example.h"]),
    ".docs/instructions.md": """
        # Instructions

        Write `tally_marks::tally(n)`: `n` strokes as tally marks, every fifth one a `/` that
        closes the group, groups separated by a space (`7` is `||||/ ||`).
    """,
    # Exercism's CMakeLists.txt names the build and its sources after the exercise's folder.
    "CMakeLists.txt": """
        cmake_minimum_required(VERSION 3.10)
        get_filename_component(exercise ${CMAKE_CURRENT_SOURCE_DIR} NAME)
        project(${exercise} CXX)
        string(REPLACE "-" "_" file ${exercise})
        add_executable(${exercise} ${file}_test.cpp ${file}.cpp ${file}.h test/tests-main.cpp)
        set_target_properties(${exercise} PROPERTIES CXX_STANDARD 17 COMPILE_FLAGS "-Wall -Wextra -Werror")
        add_custom_target(test_${exercise} ALL DEPENDS ${exercise} COMMAND ${exercise})
    """,
    "tally_marks.h": """
        #pragma once
        #include <string>

        namespace tally_marks {
        std::string tally(int strokes);
        }
    """,
    "tally_marks.cpp": """
        #include "tally_marks.h"

        namespace tally_marks {
        std::string tally(int) { return ""; }
        }
    """,
    ".meta/example.h": """
        #pragma once
        #include <string>

        namespace tally_marks {
        std::string tally(int strokes);
        }
    """,
    ".meta/example.cpp": """
        #include "tally_marks.h"

        namespace tally_marks {
        std::string tally(int strokes) {
            std::string marks;
            for (int i = 1; i <= strokes; ++i) {
                marks += i % 5 == 0 ? "/" : "|";
                if (i % 5 == 0 && i < strokes) marks += " ";
            }
            return marks;
        }
        }  // namespace tally_marks
    """,
    "tally_marks_test.cpp": """
        #include "tally_marks.h"
        #include "test/catch.hpp"

        TEST_CASE("fewer_than_a_group", "[tally]") { REQUIRE(tally_marks::tally(3) == "|||"); }

        TEST_CASE("two_groups_and_a_bit", "[tally]") { REQUIRE(tally_marks::tally(11) == "||||/ ||||/ |"); }
    """,
    "test/tests-main.cpp": """
        #define CATCH_CONFIG_MAIN
        #include "catch.hpp"
    """,
    "test/catch.hpp": CATCH_STAND_IN,
}

# ---- Python: nesting-boxes (the stub's None already passes the "does not fit" tests) -------------

PYTHON = {
    ".meta/config.json": _config(["nesting_boxes.py"], ["nesting_boxes_test.py"], [".meta/example.py"]),
    ".docs/instructions.md": """
        # Instructions

        Write `fits(inner, outer)`: whether a box of sides `inner` (three numbers) fits inside one of
        sides `outer`, turned any way, each side strictly shorter than the one it lies along.
    """,
    "nesting_boxes.py": """
        def fits(inner, outer):
            pass
    """,
    ".meta/example.py": """
        def fits(inner, outer):
            return all(a < b for a, b in zip(sorted(inner), sorted(outer)))
    """,
    "nesting_boxes_test.py": """
        import unittest

        from nesting_boxes import fits


        class NestingBoxesTest(unittest.TestCase):
            def test_smaller_box_fits(self):
                self.assertTrue(fits((1, 2, 3), (2, 3, 4)))

            def test_box_turned_to_fit(self):
                self.assertTrue(fits((5, 1, 1), (2, 6, 2)))

            def test_same_box_does_not_fit(self):
                self.assertFalse(fits((2, 2, 2), (2, 2, 2)))

            def test_longer_box_does_not_fit(self):
                self.assertFalse(fits((1, 1, 9), (5, 5, 5)))
    """,
}

# ---- Rust: dice-roll (its reference needs a crate) ------------------------------------------------

RUST = {
    ".meta/config.json": _config(["src/lib.rs", "Cargo.toml"], ["tests/dice-roll.rs"], [".meta/example.rs"]),
    ".docs/instructions.md": """
        # Instructions

        Write `Die::new(sides)` and `roll()`, a number from 1 to `sides`.
    """,
    "Cargo.toml": """
        [package]
        edition = "2021"
        name = "dice-roll"
        version = "0.1.0"

        [lints.clippy]
        new_without_default = "allow"
    """,
    ".meta/Cargo-example.toml": """
        [package]
        edition = "2021"
        name = "dice-roll"
        version = "0.1.0"

        [dependencies]
        rand = "0.3.12"
    """,
    "src/lib.rs": """
        pub struct Die;

        impl Die {
            pub fn new(sides: u32) -> Self {
                todo!("a die with {sides} sides")
            }

            pub fn roll(&mut self) -> u32 {
                todo!("roll the die")
            }
        }
    """,
    ".meta/example.rs": """
        use rand::Rng;

        pub struct Die {
            sides: u32,
        }

        impl Die {
            pub fn new(sides: u32) -> Self {
                Die { sides }
            }

            pub fn roll(&mut self) -> u32 {
                rand::thread_rng().gen_range(1, self.sides + 1)
            }
        }
    """,
    "tests/dice-roll.rs": """
        use dice_roll::Die;

        #[test]
        fn rolls_stay_on_the_die() {
            let mut die = Die::new(6);
            for _ in 0..100 {
                let face = die.roll();
                assert!((1..=6).contains(&face));
            }
        }

        #[test]
        #[ignore]
        fn a_one_sided_die_rolls_one() {
            assert_eq!(Die::new(1).roll(), 1);
        }
    """,
}

# ---- JavaScript: tip-split, and parallel-sum (its reference starts worker threads) ----------------

_JS_BUILD = {
    "package.json": """
        {
          "name": "@hitrate/{slug}",
          "private": true,
          "license": "MIT",
          "devDependencies": {
            "@babel/core": "^7.25.2",
            "@exercism/babel-preset-javascript": "^0.2.1",
            "babel-jest": "^29.6.4",
            "core-js": "~3.37.1",
            "jest": "^29.7.0"
          },
          "scripts": {"test": "jest ./*"}
        }
    """,
    "babel.config.js": """
        module.exports = {
          presets: ['@exercism/babel-preset-javascript'],
          plugins: [],
        };
    """,
}


def _javascript(slug: str, files: dict[str, str]) -> dict[str, str]:
    build = {rel: text.replace("{slug}", slug) for rel, text in _JS_BUILD.items()}
    return {".meta/config.json": _config([f"{slug}.js"], [f"{slug}.spec.js"], [".meta/proof.ci.js"]), **build, **files}


JAVASCRIPT_TIP_SPLIT = _javascript("tip-split", {
    ".docs/instructions.md": """
        # Instructions

        Write `splitBill(cents, people)`: what each of `people` pays, in whole cents, rounded up.
    """,
    "tip-split.js": """
        export const splitBill = (cents, people) => {
          throw new Error('Remove this line and implement the function');
        };
    """,
    ".meta/proof.ci.js": """
        export const splitBill = (cents, people) => Math.ceil(cents / people);
    """,
    "tip-split.spec.js": """
        import { splitBill } from './tip-split';

        describe('splitBill', () => {
          test('an even split', () => {
            expect(splitBill(900, 3)).toEqual(300);
          });

          xtest('an uneven split rounds up', () => {
            expect(splitBill(1000, 3)).toEqual(334);
          });
        });
    """,
})

JAVASCRIPT_PARALLEL_SUM = _javascript("parallel-sum", {
    ".docs/instructions.md": """
        # Instructions

        Write `parallelSum(lists)`: the sum of every number in `lists`, each list summed in a
        worker thread of its own. The result is a promise.
    """,
    "parallel-sum.js": """
        export const parallelSum = async (lists) => {
          throw new Error('Remove this line and implement the function');
        };
    """,
    ".meta/proof.ci.js": """
        import { Worker } from 'worker_threads';

        const SUM = `
          const { parentPort, workerData } = require('worker_threads');
          parentPort.postMessage(workerData.reduce((total, n) => total + n, 0));
        `;

        const sumInWorker = (numbers) =>
          new Promise((resolve, reject) => {
            const worker = new Worker(SUM, { eval: true, workerData: numbers });
            worker.once('message', resolve);
            worker.once('error', reject);
          });

        export const parallelSum = async (lists) => {
          const sums = await Promise.all(lists.map(sumInWorker));
          return sums.reduce((total, n) => total + n, 0);
        };
    """,
    "parallel-sum.spec.js": """
        import { parallelSum } from './parallel-sum';

        describe('parallelSum', () => {
          test('one list with one number', async () => {
            await expect(parallelSum([[7]])).resolves.toEqual(7);
          });

          xtest('several lists', async () => {
            await expect(parallelSum([[1, 2], [3], [4, 5, 6]])).resolves.toEqual(21);
          });
        });
    """,
})

# ---- Java: purse (helper classes Coin and Denomination, listed before Purse.java) ------------------

_JAVA_STUB = 'throw new UnsupportedOperationException("Delete this statement and write your own implementation.");'

JAVA = {
    ".meta/config.json": _config(
        ["src/main/java/Purse.java"], ["src/test/java/PurseTest.java"],
        [".meta/src/reference/java/Coin.java", ".meta/src/reference/java/Denomination.java", ".meta/src/reference/java/Purse.java"]),
    ".docs/instructions.md": """
        # Instructions

        Write `Purse`: made from coins written as `"5c"`, `"20c"` or `"$1"`, its `total()` is the
        sum in cents.
    """,
    "build.gradle": """
        plugins {
            id "java"
        }

        repositories {
            mavenCentral()
        }

        dependencies {
            testImplementation "org.junit.jupiter:junit-jupiter:5.10.0"
            testImplementation "org.assertj:assertj-core:3.25.1"
        }

        test {
            useJUnitPlatform()
        }
    """,
    "src/main/java/Purse.java": f"""
        import java.util.List;

        class Purse {{

            Purse(List<String> coins) {{
                {_JAVA_STUB}
            }}

            int total() {{
                {_JAVA_STUB}
            }}

        }}
    """,
    ".meta/src/reference/java/Denomination.java": """
        enum Denomination {
            FIVE_CENTS("5c", 5), TWENTY_CENTS("20c", 20), DOLLAR("$1", 100);

            final String label;
            final int cents;

            Denomination(String label, int cents) {
                this.label = label;
                this.cents = cents;
            }
        }
    """,
    ".meta/src/reference/java/Coin.java": """
        class Coin {
            final Denomination denomination;

            Coin(String label) {
                for (Denomination d : Denomination.values()) {
                    if (d.label.equals(label)) {
                        this.denomination = d;
                        return;
                    }
                }
                throw new IllegalArgumentException("no such coin: " + label);
            }
        }
    """,
    ".meta/src/reference/java/Purse.java": """
        import java.util.List;

        class Purse {
            private final List<Coin> coins;

            Purse(List<String> labels) {
                this.coins = labels.stream().map(Coin::new).collect(java.util.stream.Collectors.toList());
            }

            int total() {
                return coins.stream().mapToInt(c -> c.denomination.cents).sum();
            }
        }
    """,
    "src/test/java/PurseTest.java": """
        import org.junit.jupiter.api.Disabled;
        import org.junit.jupiter.api.Test;

        import java.util.List;

        import static org.assertj.core.api.Assertions.assertThat;
        import static org.assertj.core.api.Assertions.assertThatThrownBy;

        public class PurseTest {
            @Test
            public void emptyPurse() {
                assertThat(new Purse(List.of()).total()).isEqualTo(0);
            }

            @Disabled("Remove to run test")
            @Test
            public void oneCoin() {
                assertThat(new Purse(List.of("20c")).total()).isEqualTo(20);
            }

            @Disabled("Remove to run test")
            @Test
            public void mixedCoins() {
                assertThat(new Purse(List.of("$1", "5c", "20c", "5c")).total()).isEqualTo(130);
            }

            @Disabled("Remove to run test")
            @Test
            public void unknownCoin() {
                assertThatThrownBy(() -> new Purse(List.of("3c"))).isInstanceOf(IllegalArgumentException.class);
            }
        }
    """,
}


def write_polyglot_layout(root: Path) -> PolyglotSample:
    """Write the invented exercises under `root` as a polyglot checkout lays them out."""
    sample = PolyglotSample(
        root=root, cpp="tally-marks", cpp_test_cases=2, python="nesting-boxes", python_stub="nesting_boxes.py",
        rust="dice-roll", rust_oracle_crates={"rand": "0.3.12"}, rust_lint="new_without_default",
        javascript="tip-split", javascript_workers="parallel-sum", javascript_worker_case="one list with one number",
        java="purse", java_test="src/test/java/PurseTest.java", java_reference=("Coin.java", "Denomination.java", "Purse.java"),
        java_min_disabled=3,
    )  # fmt: skip
    for track, slug, files in (("cpp", sample.cpp, CPP), ("python", sample.python, PYTHON), ("rust", sample.rust, RUST),
                               ("javascript", sample.javascript, JAVASCRIPT_TIP_SPLIT),
                               ("javascript", sample.javascript_workers, JAVASCRIPT_PARALLEL_SUM), ("java", sample.java, JAVA)):  # fmt: skip
        _write(sample.exercise(track, slug), files)
    return sample


def published_checkout() -> Path | None:
    """The polyglot checkout HITRATE_POLYGLOT names, or None when it is not set."""
    named = os.environ.get(ENV)
    return Path(named) if named else None


def copy_published(checkout: Path, root: Path) -> PolyglotSample:
    """Copy the published exercises that show the same properties from `checkout` under `root`
    (the gradle wrapper and build output left behind)."""
    sample = PolyglotSample(
        root=root, cpp="zebra-puzzle", cpp_test_cases=2, python="dominoes", python_stub="dominoes.py",
        rust="robot-name", rust_oracle_crates={"rand": "0.3.12"}, rust_lint="new_without_default",
        javascript="space-age", javascript_workers="parallel-letter-frequency", javascript_worker_case="one text with one letter",
        java="poker", java_test="src/test/java/PokerTest.java", java_reference=("Card.java", "Hand.java", "Poker.java"),
        java_min_disabled=20,
    )  # fmt: skip
    wanted = [("cpp", sample.cpp), ("python", sample.python), ("rust", sample.rust), ("javascript", sample.javascript),
              ("javascript", sample.javascript_workers), ("java", sample.java)]  # fmt: skip
    ignore = shutil.ignore_patterns("gradle", "gradlew", "gradlew.bat", "node_modules", "build", "target")
    for track, slug in wanted:
        source = checkout / track / "exercises" / "practice" / slug
        if not (source / ".meta" / "config.json").is_file():
            raise FileNotFoundError(f"{ENV}={checkout} is no polyglot benchmark checkout: {source} has no .meta/config.json")
        shutil.copytree(source, sample.exercise(track, slug), ignore=ignore)
    return sample
