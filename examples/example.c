/* The C example (example.h has it all). */
#include "example.h"

int main(int argc, char **argv) { return example_main(argc, argv); }
