// The C++17 example: the same code through the same public headers.
#include "example.h"

int main(int argc, char **argv) { return example_main(argc, argv); }
