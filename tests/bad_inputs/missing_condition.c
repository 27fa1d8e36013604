// expect: for loop without condition
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; ; i++) // <- error
    a[i] = 0;
#pragma endscop
}
