"""The harness behind `verify`: the runners that put each port on the fixtures (runners.py, with
node.py for the TypeScript ports and browser.py for the WebGPU port) and the judge (compare.py)."""
