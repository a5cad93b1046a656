"""Package layout: `plugins/` ships as `pysched.plugins` (DESIGN §4 rule 8)."""

from setuptools import find_packages, setup

plugin_packages = [f"pysched.plugins.{name}" for name in find_packages("plugins")]
setup(
    packages=[*find_packages(include=["pysched", "pysched.*"]), "pysched.plugins", *plugin_packages],
    package_dir={"pysched.plugins": "plugins"},
    package_data={
        "pysched": ["py.typed"],
        "pysched.profiles": ["*.yaml"],
        "pysched.plugins": ["*/README.md"],
        "pysched.workload": ["catalogue.yaml", "data/*.csv", "data/README.md"],
    },
)
