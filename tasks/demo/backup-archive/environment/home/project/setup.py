from setuptools import setup
setup(name="app", version="1.2.0")
