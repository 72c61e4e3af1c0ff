/* A library that claims another C ABI version: the Python package must refuse it by name. */
unsigned kjit_abi_version(void) { return 999u; }
