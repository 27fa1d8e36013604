// expect: switch: use if/else
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    switch (i) { // <- error
    case 0: a[i] = 1; break;
    default: a[i] = 0;
    }
#pragma endscop
}
