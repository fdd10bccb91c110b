import sys,json,types
a=sys.argv[1:];f=open(int(a[0]),"rb") if a else sys.stdin.buffer
p=json.loads(f.readline())["params"];n=p["main"]
m=types.ModuleType(n);m.__file__="<bridge/%s.py>"%n;sys.modules[n]=m
exec(compile(p["files"][n+".py"],m.__file__,"exec"),m.__dict__)
m.main(p,f,a)
