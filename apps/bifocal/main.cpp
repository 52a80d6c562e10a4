// The `bifocal` command line: one subcommand per file in this folder.
#include <cstdio>
int main() { std::puts("bifocal"); return 0; }
